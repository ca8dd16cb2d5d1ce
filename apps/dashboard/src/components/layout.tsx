import { useEffect, useRef, useState } from 'react';
import { Link, NavLink, Outlet, useLocation } from 'react-router';
import { useNotificationFeed } from '../api/queries';
import { useAuth } from '../auth/auth-context';
import { useSession } from '../auth/session-context';
import { roleLabel, visiblePages } from '../lib/permissions';

/** Header (organization, user, notifications, sign out), side navigation and the <main> landmark. */
export function Layout() {
  const session = useSession();
  const { signOut } = useAuth();
  const feed = useNotificationFeed();
  const location = useLocation();
  const [navOpen, setNavOpen] = useState(false);
  const firstRender = useRef(true);
  const unread = feed.data?.unreadCount ?? 0;

  // A new page: close the small-screen menu and move focus to the page's heading, as a page load would.
  useEffect(() => {
    setNavOpen(false);
    if (firstRender.current) {
      firstRender.current = false;
      return;
    }
    const heading = document.getElementById('page-title') ?? document.getElementById('main');
    heading?.focus();
  }, [location.pathname]);

  return (
    <div className="app">
      <a className="skip-link" href="#main">
        Skip to main content
      </a>
      <header className="header">
        <button
          type="button"
          className="nav-toggle button-secondary"
          aria-expanded={navOpen}
          aria-controls="side-nav"
          onClick={() => setNavOpen((open) => !open)}
        >
          {navOpen ? 'Close menu' : 'Menu'}
        </button>
        <p className="brand">
          <span className="brand-product">Security Telemetry</span>
          <span className="brand-org">{session.org.name}</span>
        </p>
        <div className="header-tools">
          <Link
            to="/notifications"
            className="bell"
            // Not "Notifications …": the side navigation's link has that name.
            aria-label={unread > 0 ? `${unread} unread` : 'None unread'}
            title="Notifications"
          >
            <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" focusable="false">
              <path
                d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22zm7-6V11a7 7 0 0 0-5.5-6.84V3a1.5 1.5 0 0 0-3 0v1.16A7 7 0 0 0 5 11v5l-2 2v1h18v-1z"
                fill="currentColor"
              />
            </svg>
            {unread > 0 && <span className="badge">{unread > 99 ? '99+' : unread}</span>}
          </Link>
          <p className="user">
            <span className="user-name">{session.user.name || session.user.email}</span>
            <span className="user-role">{roleLabel(session.user.role)}</span>
          </p>
          <button type="button" className="button-secondary" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <div className="body">
        <nav id="side-nav" aria-label="Main" className={navOpen ? 'nav nav-open' : 'nav'}>
          <ul>
            {visiblePages(session.user.role).map((page) => (
              <li key={page.path}>
                <NavLink to={page.path} end={page.path === '/'}>
                  {page.label}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1} className="main">
          <Outlet />
        </main>
      </div>
    </div>
  );
}
