import { randomUUID } from 'node:crypto';

/** A clock that moves only when told to (structurally a `Clock` of every domain). */
export class ManualClock {
  constructor(private current = new Date('2026-03-01T12:00:00.000Z')) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

/** Random UUIDs, like the real generator; `issued` keeps them in order for assertions. */
export class RecordingIds {
  readonly issued: string[] = [];
  newId(): string {
    const id = randomUUID();
    this.issued.push(id);
    return id;
  }
}
