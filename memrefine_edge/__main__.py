from memrefine_edge.cli import main

main()
