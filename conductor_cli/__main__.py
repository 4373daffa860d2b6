from conductor_cli.cli.entry import main

main()
