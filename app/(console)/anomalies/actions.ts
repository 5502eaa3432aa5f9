"use server";

import { countOpenAnomalies } from "@/lib/anomalies/anomalies";
import { currentOperator } from "@/lib/auth/session";
import { getRuntime } from "@/lib/server/runtime";

/** Open anomalies per type, so the list page's counts follow its polling (there is no API route for them). */
export async function openAnomalyCounts(): Promise<Record<string, number>> {
  if (!(await currentOperator())) throw new Error("Your session has ended; sign in again.");
  return countOpenAnomalies((await getRuntime()).db.prisma);
}
