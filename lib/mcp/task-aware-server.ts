import { Server } from "@modelcontextprotocol/server";
import { isCreateTaskResult } from "./upstream/proxied-tool";

/** A task-augmented call's answer (a CreateTaskResult), carried past the SDK's check of tool results. */
class TaskAnswer {
  constructor(readonly result: unknown) {}
}

/**
 * The SDK's server, except that a 2025-11-25 task-augmented `tools/call` may be answered with the
 * task a guarded server created: the SDK checks every tools/call answer against the tool-result
 * shape of the era, and has no task-augmented calls of its own on that era.
 */
export class TaskAwareServer extends Server {
  protected override _wrapHandler(method: string, handler: Parameters<Server["_wrapHandler"]>[1]): ReturnType<Server["_wrapHandler"]> {
    if (method !== "tools/call") return super._wrapHandler(method, handler);
    const checked = super._wrapHandler(method, async (request, ctx) => {
      const result = await handler(request, ctx);
      if (isCreateTaskResult(result)) throw new TaskAnswer(result);
      return result;
    });
    return async (request, ctx) => {
      try {
        return await checked(request, ctx);
      } catch (err) {
        if (err instanceof TaskAnswer) return err.result as Awaited<ReturnType<typeof handler>>;
        throw err;
      }
    };
  }
}

