from infercrane.program import main

main()
