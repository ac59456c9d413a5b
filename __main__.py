from infercrane.shell.program import main

main()
