import Link from "next/link";
import { Children, isValidElement, type ReactNode } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";
import { guideHref, headingId } from "@/lib/docs/guides";

function textOf(node: ReactNode): string {
  if (typeof node === "string" || typeof node === "number") return String(node);
  if (Array.isArray(node)) return node.map(textOf).join("");
  if (isValidElement<{ children?: ReactNode }>(node)) return textOf(node.props.children);
  return "";
}

function heading(Tag: "h1" | "h2" | "h3" | "h4", className: string): Components["h1"] {
  return function Heading({ children }) {
    const id = headingId(textOf(children));
    return (
      <Tag id={id} className={`group scroll-mt-20 ${className}`}>
        {children}
        {Tag !== "h1" && (
          <a href={`#${id}`} aria-label="Link to this section" className="ml-2 text-muted opacity-0 group-hover:opacity-100">
            #
          </a>
        )}
      </Tag>
    );
  };
}

const components: Components = {
  h1: heading("h1", "mb-4 text-2xl font-semibold tracking-tight"),
  h2: heading("h2", "mt-10 mb-3 border-b border-line pb-1.5 text-xl font-semibold tracking-tight"),
  h3: heading("h3", "mt-8 mb-2 text-base font-semibold"),
  h4: heading("h4", "mt-6 mb-2 text-sm font-semibold"),
  p: ({ children }) => <p className="my-3 leading-relaxed">{children}</p>,
  ul: ({ children }) => <ul className="my-3 list-disc space-y-1.5 pl-6">{children}</ul>,
  ol: ({ children }) => <ol className="my-3 list-decimal space-y-1.5 pl-6">{children}</ol>,
  li: ({ children }) => <li className="leading-relaxed">{children}</li>,
  blockquote: ({ children }) => <blockquote className="my-3 border-l-2 border-line pl-4 text-muted">{children}</blockquote>,
  hr: () => <hr className="my-8 border-line" />,
  a: ({ href, children }) => {
    const target = href ? guideHref(href) : null;
    if (target === null) return <span>{children}</span>;
    if (target.startsWith("/") || target.startsWith("#")) {
      return (
        <Link href={target} className="text-accent underline-offset-2 hover:underline">
          {children}
        </Link>
      );
    }
    return (
      <a href={target} className="text-accent underline-offset-2 hover:underline" rel="noreferrer">
        {children}
      </a>
    );
  },
  table: ({ children }) => (
    <div className="my-4 overflow-x-auto rounded-lg border border-line">
      <table className="w-full border-collapse text-left text-[13px]">{children}</table>
    </div>
  ),
  thead: ({ children }) => <thead className="bg-surface-2">{children}</thead>,
  th: ({ children }) => <th className="border-b border-line px-3 py-2 font-medium whitespace-nowrap">{children}</th>,
  td: ({ children }) => <td className="border-b border-line px-3 py-2 align-top">{children}</td>,
  pre: ({ children }) => {
    const code = Children.toArray(children)[0];
    const language = isValidElement<{ className?: string }>(code) ? /language-(\w+)/.exec(code.props.className ?? "")?.[1] : undefined;
    return (
      <figure className="my-4" data-language={language}>
        {language === "mermaid" && (
          <figcaption className="mb-1 text-xs text-muted">Diagram (Mermaid source; GitHub and most Markdown viewers draw it)</figcaption>
        )}
        <pre tabIndex={0} className="overflow-x-auto rounded-lg border border-line bg-surface-2 p-3 font-mono text-[12.5px] leading-relaxed">{children}</pre>
      </figure>
    );
  },
  code: ({ className, children }) =>
    className ? <code className={className}>{children}</code> : <code className="rounded bg-surface-2 px-1 py-0.5 font-mono text-[0.9em]">{children}</code>,
};

/**
 * A guide's Markdown rendered on the server. Raw HTML in the source is not rendered (react-markdown
 * leaves it out unless a plugin asks for it) and link URLs pass its defaultUrlTransform, which drops
 * `javascript:` and other unsafe schemes; links to other guides go to their console pages.
 */
export function Markdown({ source }: { source: string }) {
  return (
    <ReactMarkdown remarkPlugins={[remarkGfm]} components={components} skipHtml>
      {source}
    </ReactMarkdown>
  );
}
