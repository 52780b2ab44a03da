/**
 * The page `/skeid/ui` answers while the admin API is off: which variable turns it on. Static
 * text only (the problem line comes from the config's own field names, never a secret).
 *
 * @module
 */

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** The off page's HTML; `problem` is the config manager's reason, when the config named a key. */
export function consoleOffPage(problem: string | null): string {
  const reason = problem === null
    ? "No admin key is configured."
    : `${problem[0].toUpperCase()}${problem.slice(1)}.`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Skeid console — admin API off</title>
<link rel="stylesheet" href="/skeid/ui/style.css">
</head><body><main class="off">
<h1>Skeid console</h1>
<p><strong>The admin API is off</strong>, so the console is too. ${escapeHtml(reason)}</p>
<p>Set the environment variable <code>SKEID_ADMIN_API_KEY</code> to a long random secret (or name
another variable in the config with <code>admin_api_key_env</code>), then restart
<code>skeid serve</code> or reload its config, and open this page again.</p>
</main></body></html>
`;
}
