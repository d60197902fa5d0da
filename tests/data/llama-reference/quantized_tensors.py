#!/usr/bin/env python3
# Adds to a reference case's JSON what llama-quantize wrote into the file llama.cpp read:
#   "llama_quantize": {"tensors_sha256": H, "types": {type name: tensor count}}
# H = sha256 over the tensors sorted by name of: the name's UTF-8 bytes, a 0 byte, the GGML type
# (uint32 little-endian), the data's byte count (uint64 little-endian), the data. Metadata and
# tensor order are left out, so a file kvserve converts compares equal when every tensor has
# llama-quantize's type and bytes (tests/qwen35_test.cc computes the same).
#   python3 quantized_tensors.py QUANTIZED.gguf CASE.json
import hashlib, json, struct, sys, collections
def rd(f, fmt): return struct.unpack('<'+fmt, f.read(struct.calcsize('<'+fmt)))
def rstr(f): n,=rd(f,'Q'); return f.read(n).decode()
def rval(f,t):
    if t==8: return rstr(f)
    if t==9:
        et,n=rd(f,'IQ'); return [rval(f,et) for _ in range(n)]
    fm={0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}[t]
    return rd(f,fm)[0]
# type id: (block elements, block bytes)
TS={0:(1,4),1:(1,2),2:(32,18),3:(32,20),6:(32,22),7:(32,24),8:(32,34),10:(256,84),11:(256,110),12:(256,144),13:(256,176),14:(256,210),20:(32,18),30:(1,2),39:(32,17)}
NAMES={0:'F32',1:'F16',2:'Q4_0',3:'Q4_1',6:'Q5_0',7:'Q5_1',8:'Q8_0',10:'Q2_K',11:'Q3_K',12:'Q4_K',13:'Q5_K',14:'Q6_K',20:'IQ4_NL',30:'BF16',39:'MXFP4'}
def load(p):
    f=open(p,'rb'); magic,ver,nt,nkv=rd(f,'4sIQQ')
    kv={}
    for _ in range(nkv):
        k=rstr(f); t,=rd(f,'I'); kv[k]=rval(f,t)
    ts=[]
    for _ in range(nt):
        n=rstr(f); nd,=rd(f,'I'); dims=rd(f,'Q'*nd); t,off=rd(f,'IQ'); ts.append((n,dims,t,off))
    align=kv.get('general.alignment',32)
    base=(f.tell()+align-1)//align*align
    data=open(p,'rb').read()
    out={}
    for n,dims,t,off in ts:
        ne=1
        for d in dims: ne*=d
        be,bb=TS[t]; size=ne//be*bb
        out[n]=(t,dims,data[base+off:base+off+size])
    return out
def tensor_hash(ts):
    h=hashlib.sha256()
    for n in sorted(ts):
        t,_,b=ts[n]
        h.update(n.encode()+b'\0'+struct.pack('<IQ',t,len(b))+b)
    return h.hexdigest()
if __name__ == '__main__':
    tensors = load(sys.argv[1])
    with open(sys.argv[2]) as f:
        case = json.load(f)
    case['llama_quantize'] = {
        'tensors_sha256': tensor_hash(tensors),
        'types': dict(sorted(collections.Counter(NAMES[t] for t, _, _ in tensors.values()).items()))}
    with open(sys.argv[2], 'w') as f:
        f.write(json.dumps(case))
    print(sys.argv[2], case['llama_quantize'])
