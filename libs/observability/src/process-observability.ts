import type { Logger } from '@sts/logger/create-logger';
import { startMetricsServer } from './metrics-server';
import { startTracing, type ContextPropagation, type TracingConfig } from './tracing';

export interface ObservabilityConfig extends TracingConfig {
  METRICS_PORT?: number | undefined;
  METRICS_HOST?: string | undefined;
}

export interface RunningObservability {
  /** The metrics endpoint's port; undefined without METRICS_PORT. */
  metricsPort: number | undefined;
  /** Closes the metrics endpoint and sends the last spans: the last step of a shutdown. */
  stop(): Promise<void>;
}

/** What every process of ours (gateway and services) starts first: tracing, then its metrics endpoint. */
export async function startObservability(
  name: string,
  config: ObservabilityConfig,
  logger: Logger,
  propagation: ContextPropagation = 'implicit',
): Promise<RunningObservability> {
  const tracing = startTracing(name, config, logger, propagation);
  try {
    const metrics =
      config.METRICS_PORT === undefined
        ? undefined
        : await startMetricsServer({
            host: config.METRICS_HOST ?? '127.0.0.1',
            port: config.METRICS_PORT,
            logger,
          });
    return {
      metricsPort: metrics?.port,
      stop: async () => {
        await metrics?.close();
        await tracing.stop();
      },
    };
  } catch (error) {
    await tracing.stop();
    throw error;
  }
}
