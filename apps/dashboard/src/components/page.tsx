import { useEffect, type ReactNode } from 'react';
import { useSession } from '../auth/session-context';
import { can, roleLabel, type Action } from '../lib/permissions';

/** Sets the document title of a page. */
export function usePageTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Security Telemetry`;
  }, [title]);
}

/** A page with its one h1; shows a plain refusal when the role may not use it. */
export function Page({
  title,
  action,
  intro,
  children,
}: {
  title: string;
  action?: Action;
  intro?: ReactNode;
  children: ReactNode;
}) {
  usePageTitle(title);
  const { role } = useSession().user;
  const allowed = !action || can(role, action);
  return (
    <>
      <h1 id="page-title" tabIndex={-1}>
        {title}
      </h1>
      {intro && <p className="intro">{intro}</p>}
      {allowed ? (
        children
      ) : (
        <p className="message message-info">
          Your role ({roleLabel(role)}) does not give access to this page. Ask an administrator of your
          organization if you need it.
        </p>
      )}
    </>
  );
}
