export { runSimulation, SimulationError, SIMULATION_DEFAULTS, type SimulationOptions } from "./run-simulation";
export { planSimulation, countPurposes, planHorizonMs, TIMING, type AgentPlan, type PlannedCall, type PlanOptions, type Purpose } from "./plan";
export { formatSummary, emptyTally, freshKeyCounts, type SimulationSummary, type ToolTally, type CausedOnPurpose, type FreshKeyDuplicateSent, type FreshKeyFigures } from "./summary";
export { simulationTarget, SimulationTargetError } from "./target";
export { Random } from "./random";
