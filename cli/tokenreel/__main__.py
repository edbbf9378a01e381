from tokenreel.cli import app

app(prog_name="tokenreel")
