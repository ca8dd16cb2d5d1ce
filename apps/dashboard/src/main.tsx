import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router';
import { QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { App } from './app';
import { ApiError } from './api/problem';
import { keys } from './api/queries';
import { AuthProvider } from './auth/auth-context';
import { readSettings } from './auth/settings';
import { createUserManager } from './auth/user-manager';
import './styles.css';

/** Composition: sign-in settings from the gateway's meta tag, the user manager, the query client, the router. */
const settings = readSettings(document);
const userManager = createUserManager(settings, window.location.origin, window.sessionStorage);

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({
    onError: (error, query) => {
      // Dashboard access turned off while signed in: every route says 403; the session page explains.
      if (
        error instanceof ApiError &&
        error.code === 'DASHBOARD_ACCESS_DENIED' &&
        query.queryKey[0] !== keys.session[0]
      )
        void queryClient.invalidateQueries({ queryKey: keys.session });
    },
  }),
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      refetchOnWindowFocus: false,
      // A refusal (4xx) will not change by asking again; failures (5xx, network) may.
      retry: (failures, error) => !(error instanceof ApiError && error.status < 500) && failures < 2,
    },
  },
});

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <AuthProvider userManager={userManager}>
        <BrowserRouter>
          <App />
        </BrowserRouter>
      </AuthProvider>
    </QueryClientProvider>
  </StrictMode>,
);
