import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

/**
 * The gateway serves dist/apps/dashboard: index.html for every page address and assets/ as hashed,
 * immutable files. Its Content-Security-Policy allows scripts and styles from this origin only, so
 * nothing may be inlined (no modulepreload polyfill, no inlined assets).
 */
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: '../../dist/apps/dashboard',
    emptyOutDir: true,
    assetsDir: 'assets',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
  server: {
    port: 5173,
    // `vite dev` beside a running gateway: the API on the same origin, as in production.
    proxy: { '/api': 'http://127.0.0.1:8080' },
  },
});
