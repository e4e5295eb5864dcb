"""What every task shares; imports no task package."""
