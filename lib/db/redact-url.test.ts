import { describe, expect, it } from "vitest";
import { redactUrl } from "./redact-url";

describe("redactUrl", () => {
  it("keeps scheme, host, port and path", () => {
    expect(redactUrl("postgresql://127.0.0.1:5432/idemgate")).toBe("postgresql://127.0.0.1:5432/idemgate");
    expect(redactUrl("redis://cache.internal:6380/2")).toBe("redis://cache.internal:6380/2");
    expect(redactUrl("rediss://[::1]:6379")).toBe("rediss://[::1]:6379");
    expect(redactUrl("postgresql:///idemgate")).toBe("postgresql:///idemgate");
  });

  it("drops user info: user name and password", () => {
    expect(redactUrl("postgresql://app:s3cr3t@db.internal:5432/idemgate")).toBe("postgresql://db.internal:5432/idemgate");
    expect(redactUrl("redis://:hunter2@127.0.0.1:6379/0")).toBe("redis://127.0.0.1:6379/0");
    expect(redactUrl("redis://default:hunter2@127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
    expect(redactUrl("postgresql://app@db.internal/idemgate")).toBe("postgresql://db.internal/idemgate");
  });

  it("drops the query string, where a password can be given too, and the fragment", () => {
    const shown = redactUrl("postgresql://db.internal/idemgate?password=qs-s3cr3t&sslmode=require&sslkey=/etc/key.pem#frag");
    expect(shown).toBe("postgresql://db.internal/idemgate");
    expect(redactUrl("redis://127.0.0.1:6379/?password=qs-s3cr3t")).toBe("redis://127.0.0.1:6379/");
    // percent-encoded or oddly placed secrets go with the part that holds them
    for (const url of [
      "postgresql://u%40x:p%3Aw%2Fd@h/db?password=p%26w",
      "postgresql://h/db?sslmode=require&PASSWORD=s3cr3t",
      "postgresql://h/db?&password=s3cr3t",
    ]) {
      expect(redactUrl(url)).not.toMatch(/s3cr3t|p%3Aw|p%26w|password|u%40x/i);
    }
  });

  it("shows nothing of what is not a URL (a connection string in key=value form, say)", () => {
    expect(redactUrl("host=db user=app password=s3cr3t")).toBe("(unparseable URL)");
    expect(redactUrl("")).toBe("(unparseable URL)");
  });
});
