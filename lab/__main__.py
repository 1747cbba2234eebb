from lab.start import main

main()
