import { Lifecycle } from './lifecycle';

describe('Lifecycle', () => {
  it('closes in reverse order, once, and survives a failing closer', async () => {
    const order: string[] = [];
    const errors: string[] = [];
    const lifecycle = new Lifecycle((name) => errors.push(name));
    lifecycle.add('db', () => order.push('db'));
    lifecycle.add('broken', () => {
      throw new Error('x');
    });
    lifecycle.add('server', async () => {
      await Promise.resolve();
      order.push('server');
    });
    await Promise.all([lifecycle.close(), lifecycle.close()]);
    expect(order).toEqual(['server', 'db']);
    expect(errors).toEqual(['broken']);
  });

  it('says which step is still running after the slow-step time', async () => {
    const slow: string[] = [];
    const lifecycle = new Lifecycle(undefined, (name, elapsedMs) => slow.push(`${name} ${elapsedMs}`), 20);
    lifecycle.add('quick', () => undefined);
    lifecycle.add('consumer', () => new Promise((resolve) => setTimeout(resolve, 100)));
    await lifecycle.close();
    expect(slow).toEqual(['consumer 20']);
  });
});
