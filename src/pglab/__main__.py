from pglab.cli import main

raise SystemExit(main())
