
def extra(outputs, case):
    again = impl(outputs["tensor"])
    assert torch.equal(again._indices(), outputs["indices"]), "coalesce(coalesce(x)) changed the indices"
    bits_equal("values of coalesce(coalesce(x))", again._values(), outputs["values"])
