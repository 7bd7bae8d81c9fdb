from pydb.plugin.main import main

raise SystemExit(main())
