"""What a model reads: answers shaped for the budget, paging and cursors."""
