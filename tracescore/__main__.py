"""`python -m tracescore` runs the command-line tool."""

from tracescore.cli import main

if __name__ == "__main__":
    main()
