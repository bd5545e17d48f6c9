// Builds the bundle shipped in the Python package: src/spmdgpt/web/spmdgpt-web.js (ESM,
// unminified so that a diff shows what changed) and copies index.html beside it.
// `node build.mjs --check` builds into memory and exits 1 when the shipped files differ.

import { build } from "esbuild";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dest = join(here, "..", "src", "spmdgpt", "web");
const check = process.argv.includes("--check");

const result = await build({
  entryPoints: ["src/index.js"],
  absWorkingDir: here, // (the paths in the bundle's comments are relative to web/, wherever it is built)
  bundle: true,
  format: "esm",
  platform: "neutral",
  mainFields: ["module", "main"],
  target: "es2022",
  legalComments: "inline",
  write: false,
  logLevel: "warning",
});
const files = {
  "spmdgpt-web.js": result.outputFiles[0].contents,
  "index.html": readFileSync(join(here, "index.html")),
};
let stale = [];
for (const [name, data] of Object.entries(files)) {
  const path = join(dest, name);
  if (check) {
    let old = null;
    try { old = readFileSync(path); } catch { /* missing */ }
    if (!old || Buffer.compare(Buffer.from(data), old) !== 0) stale.push(path);
  } else writeFileSync(path, data);
}
if (stale.length) {
  console.error(`stale: ${stale.join(", ")}; rebuild with: cd web && npm ci && npm run build`);
  process.exit(1);
}
console.log(check ? "the shipped bundle matches a fresh build" : `built ${Object.keys(files).join(", ")} in ${dest}`);
