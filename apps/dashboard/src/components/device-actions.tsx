import { useId, useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { deleteDevice, setDeviceStatus } from '../api/devices';
import { keys } from '../api/queries';
import type { Device } from '../api/types';
import { useApi } from '../auth/auth-context';
import { useCan } from '../auth/session-context';
import { ConfirmDialog } from './confirm-dialog';

/**
 * Disable/Enable (ORG_ADMIN, ANALYST) and Delete device (ORG_ADMIN, after confirmation). Tells the
 * caller what happened (or what the API refused) through onDone / onError.
 */
export function DeviceActions({
  device,
  onDone,
  onError,
  onDeleted,
}: {
  device: Device;
  onDone: (message: string) => void;
  onError: (error: unknown) => void;
  onDeleted?: () => void;
}) {
  const api = useApi();
  const can = useCan();
  const queryClient = useQueryClient();
  const [confirming, setConfirming] = useState(false);
  const nameId = useId();
  const refresh = () => queryClient.invalidateQueries({ queryKey: keys.devices });

  const status = useMutation({
    mutationFn: (action: 'disable' | 'enable') => setDeviceStatus(api, device.id, action),
    onSuccess: async (_nothing, action) => {
      onDone(`${device.name} ${action === 'disable' ? 'disabled' : 'enabled'}.`);
      await refresh();
    },
    onError,
  });
  const remove = useMutation({
    mutationFn: () => deleteDevice(api, device.id),
    onSuccess: async () => {
      setConfirming(false);
      onDone(`${device.name} deleted with all its telemetry.`);
      await refresh();
      onDeleted?.();
    },
  });

  if (!can('devices.changeStatus') && !can('devices.delete')) return <span className="muted">—</span>;
  const action = device.status === 'active' ? 'disable' : 'enable';
  return (
    <div className="row-actions">
      <span id={nameId} hidden>
        {device.name}
      </span>
      {can('devices.changeStatus') && (
        <button
          type="button"
          className="button-secondary"
          aria-describedby={nameId}
          onClick={() => status.mutate(action)}
          disabled={status.isPending}
        >
          {action === 'disable' ? 'Disable' : 'Enable'}
        </button>
      )}
      {can('devices.delete') && (
        <>
          <button
            type="button"
            className="button-danger"
            aria-describedby={nameId}
            onClick={() => {
              remove.reset();
              setConfirming(true);
            }}
          >
            Delete device
          </button>
          <ConfirmDialog
            open={confirming}
            title={`Delete ${device.name}?`}
            confirmLabel="Confirm"
            busy={remove.isPending}
            error={remove.error}
            onCancel={() => setConfirming(false)}
            onConfirm={() => remove.mutate()}
          >
            <p>
              {device.name} and all its telemetry will be removed permanently. This cannot be undone. To stop
              it for a while instead, disable it.
            </p>
          </ConfirmDialog>
        </>
      )}
    </div>
  );
}
