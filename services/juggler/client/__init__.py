"""The client side (what the CLI runs against a deployment): query commands on the
`juggler.control` topic and their outcomes on `juggler.control.status` (semantics
section 4; `control`), producing events (`produce`), reports of the registered queries
(`report`) and following results (`tail`)."""
