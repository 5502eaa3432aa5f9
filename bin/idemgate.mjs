#!/usr/bin/env node
// `npx idemgate …`: runs the TypeScript CLI through tsx, from the project root, so `.data/`,
// prisma/migrations and the tsconfig path aliases resolve wherever the command was typed.
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { register } from "tsx/esm/api";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// A data directory given relative to where the command was typed keeps meaning that place.
const dataDir = process.env.IDEMGATE_DATA_DIR?.trim();
if (dataDir && !isAbsolute(dataDir)) process.env.IDEMGATE_DATA_DIR = resolve(process.cwd(), dataDir);
process.chdir(root);
register({ tsconfig: join(root, "tsconfig.json") });
const { main, exitWhenDone } = await import(pathToFileURL(join(root, "cli", "idemgate.ts")).href);
exitWhenDone(await main(process.argv));
