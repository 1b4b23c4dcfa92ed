
def run(inputs):
    coo = inputs["tensor"]
    indices = tensor(coo["indices"], torch.int64)
    values = tensor(coo["values"]).to(DTYPE)
    out = impl(torch.sparse_coo_tensor(indices, values, coo["size"]))
    return {"indices": out._indices(), "values": out._values(), "nnz": out._nnz(),
            "size": list(out.shape), "is_coalesced": out.is_coalesced(), "tensor": out}
