import { unknownApiPath } from "@/lib/http/unknown-api-path";

export const dynamic = "force-dynamic";

// ANY /api/* that no route serves – 404 problem+json, whatever the method
export const GET = unknownApiPath;
export const HEAD = unknownApiPath;
export const POST = unknownApiPath;
export const PUT = unknownApiPath;
export const PATCH = unknownApiPath;
export const DELETE = unknownApiPath;
export const OPTIONS = unknownApiPath;
