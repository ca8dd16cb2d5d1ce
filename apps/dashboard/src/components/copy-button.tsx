import { useEffect, useState } from 'react';

async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain http to another machine has no Clipboard API: the old way still works there.
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'visually-hidden';
  document.body.append(area);
  area.select();
  const copied = document.execCommand('copy');
  area.remove();
  if (!copied) throw new Error('copy refused');
}

/** Copies a value; says "Copied" (or that it could not) in a live region beside it. */
export function CopyButton({ value, label }: { value: string; label: string }) {
  const [outcome, setOutcome] = useState<'idle' | 'copied' | 'failed'>('idle');
  useEffect(() => {
    if (outcome === 'idle') return;
    const timer = setTimeout(() => setOutcome('idle'), 3000);
    return () => clearTimeout(timer);
  }, [outcome]);
  return (
    <span className="copy">
      <button
        type="button"
        className="button-secondary"
        onClick={() => {
          copyText(value).then(
            () => setOutcome('copied'),
            () => setOutcome('failed'),
          );
        }}
      >
        {label}
      </button>
      <span aria-live="polite" className="copy-outcome">
        {outcome === 'copied'
          ? 'Copied'
          : outcome === 'failed'
            ? 'Could not copy: select the text instead'
            : ''}
      </span>
    </span>
  );
}
