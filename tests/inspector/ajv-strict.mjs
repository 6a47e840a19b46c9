// Compile JSON Schemas with Ajv (draft 2020-12) in strict mode, as a strict JavaScript
// client would. Reads one JSON file, an object of schemas by name; prints one JSON
// object: for each schema that does not compile, its name and Ajv's message. Exits 0
// when it could check them all, whatever it found (the caller judges), else 1.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const Ajv2020 = require("ajv/dist/2020").default;

const schemas = JSON.parse(readFileSync(process.argv[2], "utf8"));
const refused = {};
for (const [name, schema] of Object.entries(schemas)) {
  // A fresh instance each time: one schema's `$id`s cannot clash with another's.
  // `date-time` is known (no format is checked here: compiling is the test).
  const ajv = new Ajv2020({ strict: true, allErrors: true, formats: { "date-time": true } });
  try {
    ajv.compile(schema);
  } catch (error) {
    refused[name] = String(error.message);
  }
}
process.stdout.write(JSON.stringify(refused) + "\n");
