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

  it("opens only the handle as it was made, not another spelling of the same bytes", () => {
    // the last of the MAC's 43 base64url characters carries 4 bits and 2 unused ones: changing an
    // unused bit spells the same 32 bytes differently (a decoder ignores those bits)
    const handle = handles.handle("tenant-a", target);
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const respelled = handle.slice(0, -1) + alphabet[alphabet.indexOf(handle.at(-1)!) ^ 1];
    expect(Buffer.from(respelled.split(".")[2], "base64url")).toEqual(Buffer.from(handle.split(".")[2], "base64url"));
    expect(handles.open("tenant-a", respelled)).toBeNull();
  });
});
