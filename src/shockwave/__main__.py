from shockwave.cli import main

main()
