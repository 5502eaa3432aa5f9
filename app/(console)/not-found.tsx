import { NotFoundPanel } from "@/components/not-found-panel";

export default function ConsoleNotFound() {
  return <NotFoundPanel />;
}
