"""Every example of the torch.compile reference documents (../shared/reference/), with xcompile in
torch's place, behaving as the document says."""
