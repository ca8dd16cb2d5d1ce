import { ConfigError } from '@sts/config/load-config';
import { loadDevIdpConfig, PRODUCTION_REFUSAL } from './dev-idp-config';

describe("the development identity provider's configuration", () => {
  it('derives the issuer from the port unless it is given', () => {
    expect(loadDevIdpConfig({ DEV_IDP_PORT: '4401', DEV_IDP_ISSUER: '' }).issuer).toBe(
      'http://127.0.0.1:4401',
    );
    expect(loadDevIdpConfig({ DEV_IDP_ISSUER: 'http://idp.test' }).issuer).toBe('http://idp.test');
  });

  it("registers the dashboard's public client, by default on localhost:8080", () => {
    expect(loadDevIdpConfig({}).dashboardClient).toEqual({
      clientId: 'sts-dashboard',
      redirectUris: ['http://localhost:8080/auth/callback', 'http://127.0.0.1:8080/auth/callback'],
      postLogoutRedirectUris: ['http://localhost:8080/', 'http://127.0.0.1:8080/'],
    });
    expect(
      loadDevIdpConfig({
        DASHBOARD_OIDC_CLIENT_ID: 'my-dashboard',
        DEV_IDP_DASHBOARD_URLS: ' https://dash.test:8443/ , http://localhost:5173',
      }).dashboardClient,
    ).toEqual({
      clientId: 'my-dashboard',
      redirectUris: ['https://dash.test:8443/auth/callback', 'http://localhost:5173/auth/callback'],
      postLogoutRedirectUris: ['https://dash.test:8443/', 'http://localhost:5173/'],
    });
  });

  it.each([
    ['DEV_IDP_DASHBOARD_URLS', 'http://localhost:8080/app'],
    ['DEV_IDP_DASHBOARD_URLS', 'localhost:8080'],
    ['DEV_IDP_DASHBOARD_URLS', 'http://localhost:8080/?x'],
    ['DEV_IDP_DASHBOARD_URLS', 'ftp://localhost:8080'],
    ['DEV_IDP_DASHBOARD_URLS', 'http://localhost:8080,not a url'],
    ['DEV_IDP_DASHBOARD_URLS', ','],
    ['DASHBOARD_OIDC_CLIENT_ID', 'has spaces'],
  ])('refuses %s=%p', (name, value) => {
    expect(() => loadDevIdpConfig({ [name]: value })).toThrow(new RegExp(name));
  });

  it('refuses NODE_ENV=production as a configuration error that says why', () => {
    expect(() => loadDevIdpConfig({ NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => loadDevIdpConfig({ NODE_ENV: 'production' })).toThrow(PRODUCTION_REFUSAL);
  });
});
