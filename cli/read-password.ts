import { CliError } from "./errors";

/**
 * The password from stdin: typed without echo on a terminal (asked twice), or the first line of a
 * pipe (`echo "$PW" | idemgate operator create …`).
 */
export async function readPassword(prompt = "Password: "): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) return readFirstLine(stdin);
  const first = await readHidden(prompt);
  const again = await readHidden("Repeat it: ");
  if (first !== again) throw new CliError("the two passwords differ; nothing was created");
  return first;
}

async function readFirstLine(stream: NodeJS.ReadStream): Promise<string> {
  let text = "";
  for await (const chunk of stream) {
    text += chunk.toString("utf8");
    const newline = text.search(/\r?\n/);
    if (newline >= 0) {
      stream.destroy();
      return text.slice(0, newline);
    }
  }
  if (text === "") throw new CliError("no password on stdin: pipe it in (first line) or run the command in a terminal");
  return text;
}

function readHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding("utf8");
  return new Promise((resolve, reject) => {
    let value = "";
    const finish = (err?: Error) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off("data", onData);
      process.stderr.write("\n");
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === "\r" || ch === "\n" || ch === "\u0004") return finish();
        if (ch === "\u0003") return finish(new CliError("cancelled", 130));
        if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
        else if (ch >= " ") value += ch;
      }
    };
    stdin.on("data", onData);
  });
}
