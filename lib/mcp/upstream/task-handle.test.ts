import { describe, expect, it } from "vitest";
import { TaskHandles } from "./task-handle";

const secret = "a test secret of at least thirty-two characters";

describe("task handles", () => {
  const handles = new TaskHandles(secret);
  const target = { tool: "jobs.start_job", taskId: "786512e2-9e0d-44bd-8f29-789f320fe840" };

  it("names the same task with the same handle every time, and opens it for its scope", () => {
    const handle = handles.handle("tenant-a", target);
    expect(new TaskHandles(secret).handle("tenant-a", target)).toBe(handle);
    expect(handles.open("tenant-a", handle)).toEqual(target);
  });

  it("opens nothing for another scope, another secret, or a changed handle", () => {
    const handle = handles.handle("tenant-a", target);
    expect(handles.open("tenant-b", handle)).toBeNull();
    expect(new TaskHandles(`${secret}!`).open("tenant-a", handle)).toBeNull();
    const [prefix, payload, mac] = handle.split(".");
    const otherTask = Buffer.from(JSON.stringify([target.tool, "another-task"])).toString("base64url");
    expect(handles.open("tenant-a", `${prefix}.${otherTask}.${mac}`)).toBeNull();
    expect(handles.open("tenant-a", `${prefix}.${payload}.${mac.slice(0, -2)}`)).toBeNull();
    expect(handles.open("tenant-a", target.taskId)).toBeNull();
    expect(handles.open("tenant-a", "")).toBeNull();
  });
});
