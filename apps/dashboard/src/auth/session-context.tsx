import { createContext, useContext, type ReactNode } from 'react';
import type { Session } from '../api/types';
import { can, type Action } from '../lib/permissions';

const SessionContext = createContext<Session | undefined>(undefined);

export function SessionProvider({ session, children }: { session: Session; children: ReactNode }) {
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside SessionProvider');
  return session;
}

/** Whether the signed-in user's role may take an action. */
export function useCan(): (action: Action) => boolean {
  const { role } = useSession().user;
  return (action) => can(role, action);
}
