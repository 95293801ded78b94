"""p4c's STF test format, run against the p4sim v1model engine (``p4sim stf``).

* `syntax`  -- STF text -> typed commands with file:line (no program needed);
* `program` -- the BMv2 JSON's tables, actions, keys and externs by STF name;
* `keys`    -- STF key values -> engine match objects, priorities (p4c's rules);
* `cli`     -- the simple_switch_CLI commands STF files pass through;
* `runner`  -- drives the engine and judges expectations like p4c's runner;
* `command` -- the command line.
"""
