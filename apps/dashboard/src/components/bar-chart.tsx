import { useId } from 'react';
import type { AnalyticsWindow, Point } from '../lib/buckets';
import { niceMax } from '../lib/buckets';
import { bucketLabel, formatMetric, metricLabel, windowLabel, type MetricName } from '../lib/format';
import { utcTitle } from '../lib/relative-time';

// Drawn two to a row at 1280 px: a narrower box keeps the axis labels readable when scaled.
const WIDTH = 480;
const HEIGHT = 200;
const LEFT = 56;
const BOTTOM = 28;
const TOP = 12;

/**
 * One metric per bucket as SVG bars: every bar has a <title> (hover, and screen readers that read
 * SVG), and a visually hidden table gives the same figures to every screen reader.
 */
export function BarChart({
  metric,
  window,
  points,
}: {
  metric: MetricName;
  window: AnalyticsWindow;
  points: readonly Point[];
}) {
  const captionId = useId();
  const max = niceMax(points.map((point) => point.value));
  const plotWidth = WIDTH - LEFT - 8;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const slot = plotWidth / Math.max(points.length, 1);
  const barWidth = Math.max(2, slot * 0.7);
  const labelEvery = window === '24h' ? 3 : 5;
  const caption = `${metricLabel(metric)} per ${window === '24h' ? 'hour' : 'day'}, ${windowLabel(window)} (UTC buckets)`;
  const total = points.reduce((sum, point) => sum + point.value, 0);

  return (
    <figure className="chart">
      <figcaption id={captionId}>{caption}</figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={captionId}
        className="chart-svg"
        preserveAspectRatio="xMidYMid meet"
      >
        <line x1={LEFT} x2={WIDTH - 8} y1={TOP + plotHeight} y2={TOP + plotHeight} className="chart-axis" />
        <line x1={LEFT} x2={WIDTH - 8} y1={TOP} y2={TOP} className="chart-grid" />
        <line
          x1={LEFT}
          x2={WIDTH - 8}
          y1={TOP + plotHeight / 2}
          y2={TOP + plotHeight / 2}
          className="chart-grid"
        />
        <text x={LEFT - 6} y={TOP + 4} textAnchor="end" className="chart-label">
          {formatMetric(metric, max)}
        </text>
        <text x={LEFT - 6} y={TOP + plotHeight / 2 + 4} textAnchor="end" className="chart-label">
          {formatMetric(metric, max / 2)}
        </text>
        <text x={LEFT - 6} y={TOP + plotHeight + 4} textAnchor="end" className="chart-label">
          0
        </text>
        {points.map((point, index) => {
          const height = (point.value / max) * plotHeight;
          const x = LEFT + index * slot + (slot - barWidth) / 2;
          return (
            <g key={point.timestamp}>
              <rect
                x={x}
                y={TOP + plotHeight - height}
                width={barWidth}
                height={Math.max(height, point.value > 0 ? 1 : 0)}
                className="chart-bar"
              >
                <title>{`${bucketLabel(point.timestamp, window)} (${utcTitle(point.timestamp)}): ${formatMetric(metric, point.value)}`}</title>
              </rect>
              {/* A transparent full-height target makes small bars easy to hover. */}
              <rect x={LEFT + index * slot} y={TOP} width={slot} height={plotHeight} className="chart-hit">
                <title>{`${bucketLabel(point.timestamp, window)}: ${formatMetric(metric, point.value)}`}</title>
              </rect>
              {index % labelEvery === (points.length - 1) % labelEvery && (
                <text x={x + barWidth / 2} y={HEIGHT - 8} textAnchor="middle" className="chart-label">
                  {bucketLabel(point.timestamp, window)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <p className="chart-total">
        {metric === 'avg_classification_ms'
          ? `Peak bucket: ${formatMetric(metric, Math.max(0, ...points.map((p) => p.value)))}`
          : `Sum over the window: ${formatMetric(metric, total)}`}
      </p>
      {/* A table ignores overflow: its hidden wrapper keeps it from stretching the page. */}
      <div className="visually-hidden">
        <table>
          <caption>{caption}</caption>
          <thead>
            <tr>
              <th scope="col">Bucket start (UTC)</th>
              <th scope="col">{metricLabel(metric)}</th>
            </tr>
          </thead>
          <tbody>
            {points.map((point) => (
              <tr key={point.timestamp}>
                <th scope="row">{point.timestamp}</th>
                <td>{formatMetric(metric, point.value)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </figure>
  );
}
