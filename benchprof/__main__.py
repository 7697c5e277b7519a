from benchprof.cli import main

main()
