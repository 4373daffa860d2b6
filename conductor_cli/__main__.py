from conductor_cli.cli.app import main

main()
