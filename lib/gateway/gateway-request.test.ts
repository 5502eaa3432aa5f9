import { describe, expect, it } from "vitest";
import { keySourceHeader, preferredWaitSeconds } from "./gateway-request";

const headers = (values: Record<string, string>) => new Headers(values);
const token = { tokenId: "t", scope: "s" };

describe("Prefer: wait", () => {
  it("reads wait=N among other preferences, caps it at 60 s, and ignores what asks for no wait", () => {
    expect(preferredWaitSeconds(headers({ prefer: "wait=10" }))).toBe(10);
    expect(preferredWaitSeconds(headers({ prefer: "respond-async, wait=5" }))).toBe(5);
    expect(preferredWaitSeconds(headers({ prefer: 'wait="7"' }))).toBe(7);
    expect(preferredWaitSeconds(headers({ prefer: "WAIT = 3" }))).toBe(3);
    expect(preferredWaitSeconds(headers({ prefer: "wait=600" }))).toBe(60);
    expect(preferredWaitSeconds(headers({ prefer: "wait=0" }))).toBeNull();
    expect(preferredWaitSeconds(headers({ prefer: "wait=-1" }))).toBeNull();
    expect(preferredWaitSeconds(headers({ prefer: "return=minimal" }))).toBeNull();
    expect(preferredWaitSeconds(headers({}))).toBeNull();
  });
});

describe("Idemgate-Key-Source", () => {
  it("is the orchestrator's by default, the model's when said or when the token has advisory keys", () => {
    expect(keySourceHeader(headers({}), token)).toBe("orchestrator");
    expect(keySourceHeader(headers({ "idemgate-key-source": "model" }), token)).toBe("model");
    expect(keySourceHeader(headers({ "idemgate-key-source": "Model " }), token)).toBe("model");
    expect(keySourceHeader(headers({}), { ...token, advisoryKeys: true })).toBe("model");
    // a call may still say its key came from the orchestrator
    expect(keySourceHeader(headers({ "idemgate-key-source": "orchestrator" }), { ...token, advisoryKeys: true })).toBe("orchestrator");
  });

  it("refuses anything else with a readable 400", () => {
    expect(() => keySourceHeader(headers({ "idemgate-key-source": "llm" }), token)).toThrow(/must be `model`/);
  });
});
