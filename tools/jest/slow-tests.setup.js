// Integration and end-to-end tests talk to real servers; per-project `testTimeout` is not honoured, so set it here.
jest.setTimeout(60_000);
