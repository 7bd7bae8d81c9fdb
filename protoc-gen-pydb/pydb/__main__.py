from pydb.plugin.entry import main

raise SystemExit(main())
