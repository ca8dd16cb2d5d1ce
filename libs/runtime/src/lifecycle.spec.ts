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
});
