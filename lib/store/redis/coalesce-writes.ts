import type { Redis } from "ioredis";

/**
 * Commands sent on this connection in the same turn of the event loop leave in one write: the
 * first one corks the socket and the socket is uncorked once the turn's callbacks and promise
 * continuations have run (process.nextTick, queued from within them, runs after they drain). With
 * many calls in flight, the replies to one read resolve many calls, whose next commands then go out
 * together instead of one system call each (docs/benchmarks.md: a quarter of the engine's CPU per
 * first execution at 50 callers was these writes). A command sent alone goes out in the same turn
 * as before. Nothing is held past the turn, unlike ioredis's auto-pipelining, which waits for
 * setImmediate and measured slower here (createRedisKeyStore).
 *
 * Commands given a stream of their own (a pipeline's, a MULTI's) are left as ioredis sends them.
 */
export function coalesceWrites(redis: Redis): void {
  const send = redis.sendCommand.bind(redis);
  let corked = false;
  redis.sendCommand = (command, stream) => {
    const socket = redis.stream;
    if (!corked && stream === undefined && socket?.writable) {
      corked = true;
      socket.cork();
      process.nextTick(() => {
        corked = false;
        socket.uncork();
      });
    }
    return send(command, stream);
  };
}
