/**
 * Whether the specs save their pictures of the console to e2e/screenshots/ (for reviewing a UI
 * change; nothing in docs/ embeds them): `IDEMGATE_E2E_SCREENSHOTS=1 npm run test:e2e`. A failing
 * test always leaves a screenshot in test-results/ (playwright.config.ts).
 */
export const SCREENSHOTS = process.env.IDEMGATE_E2E_SCREENSHOTS === "1";
