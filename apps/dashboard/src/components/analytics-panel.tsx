import { useId } from 'react';
import { useQuery } from '@tanstack/react-query';
import { getOverview } from '../api/analytics';
import { keys } from '../api/queries';
import type { AnalyticsWindow } from '../api/types';
import { useApi } from '../auth/auth-context';
import { fillBuckets } from '../lib/buckets';
import { formatMetric, METRICS, windowLabel } from '../lib/format';
import { BarChart } from './bar-chart';
import { Loading, ProblemMessage } from './status';

const ANALYTICS_POLL_MS = 15_000;

export function isWindow(value: string | null): value is AnalyticsWindow {
  return value === '24h' || value === '30d';
}

/** A group of radio buttons drawn as a segmented control. */
function Choice<T extends string>({
  legend,
  name,
  value,
  options,
  onChange,
}: {
  legend: string;
  name: string;
  value: T;
  options: readonly { value: T; label: string }[];
  onChange: (value: T) => void;
}) {
  const id = useId();
  return (
    <fieldset className="segmented">
      <legend>{legend}</legend>
      {options.map((option) => (
        <label key={option.value} htmlFor={`${id}-${option.value}`}>
          <input
            id={`${id}-${option.value}`}
            type="radio"
            name={`${name}-${id}`}
            value={option.value}
            checked={value === option.value}
            onChange={() => onChange(option.value)}
          />
          <span>{option.label}</span>
        </label>
      ))}
    </fieldset>
  );
}

/**
 * The four summary figures of a window and a chart per metric, from one request
 * (GET /api/analytics/overview), read again every 15 s so new telemetry shows without a reload.
 */
export function AnalyticsPanel({
  window,
  deviceId,
  onWindowChange,
  headingLevel = 2,
}: {
  window: AnalyticsWindow;
  deviceId?: string;
  onWindowChange: (window: AnalyticsWindow) => void;
  headingLevel?: 2 | 3;
}) {
  const api = useApi();
  const overview = useQuery({
    queryKey: [...keys.analytics, 'overview', window, deviceId ?? ''],
    queryFn: ({ signal }) => getOverview(api, window, deviceId, signal),
    refetchInterval: ANALYTICS_POLL_MS,
  });
  const Heading = headingLevel === 2 ? 'h2' : 'h3';
  const now = new Date();

  return (
    <section className="analytics" aria-labelledby="analytics-heading">
      <Heading id="analytics-heading">Activity, {windowLabel(window)}</Heading>
      <Choice
        legend="Time window"
        name="window"
        value={window}
        options={[
          { value: '24h', label: 'Last 24 hours' },
          { value: '30d', label: 'Last 30 days' },
        ]}
        onChange={onWindowChange}
      />
      {overview.error ? (
        <ProblemMessage error={overview.error} onRetry={() => void overview.refetch()} />
      ) : !overview.data ? (
        <Loading what="the figures" />
      ) : (
        <>
          <dl className="figures">
            {METRICS.map((item) => (
              <div key={item.key} className={`figure figure-${item.key}`}>
                <dt>{item.label}</dt>
                <dd>{formatMetric(item.key, overview.data.summary[item.key])}</dd>
              </div>
            ))}
          </dl>
          <div className="charts">
            {METRICS.map((item) => (
              <BarChart
                key={item.key}
                metric={item.key}
                window={window}
                points={fillBuckets(overview.data.series[item.key], window, now)}
              />
            ))}
          </div>
        </>
      )}
    </section>
  );
}
